"""Check tools/build_tf2_msgs.sh: a TFMessage published by one rclpy node reaches another (same process).

Usage: .venv/bin/python tools/check_tf2_msgs.py   (prints the RIHS01 type hash; exit 0 = OK)
"""
import os
import sys
import time

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

print('RMW_IMPLEMENTATION', os.environ.get('RMW_IMPLEMENTATION'), 'rmw:', rclpy.get_rmw_implementation_identifier())
rclpy.init()
pub_node = rclpy.create_node('tf_pub_check')
sub_node = rclpy.create_node('tf_sub_check')
got = []
qos_static = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
sub = sub_node.create_subscription(TFMessage, '/tf', got.append, 10)
sub_s = sub_node.create_subscription(TFMessage, '/tf_static', got.append, qos_static)
pub = pub_node.create_publisher(TFMessage, '/tf', 10)
pub_s = pub_node.create_publisher(TFMessage, '/tf_static', qos_static)

t = TransformStamped()
t.header.frame_id = 'world'
t.child_frame_id = 'base_link'
t.transform.translation.x = 1.5
t.transform.rotation.w = 1.0
msg = TFMessage(transforms=[t, t])
pub_s.publish(TFMessage(transforms=[t]))

ex = rclpy.executors.SingleThreadedExecutor()
ex.add_node(pub_node)
ex.add_node(sub_node)
deadline = time.time() + 10
while len(got) < 3 and time.time() < deadline:
    pub.publish(msg)
    ex.spin_once(timeout_sec=0.1)
print('received', len(got), [len(m.transforms) for m in got[:3]], got[0].transforms[0].child_frame_id if got else None)
for info in pub_node.get_publishers_info_by_topic('/tf'):
    print('publisher', info.node_name, info.topic_type, info.topic_type_hash)
ok = len(got) >= 3 and got[0].transforms[0].transform.translation.x == 1.5
pub_node.destroy_node(); sub_node.destroy_node(); rclpy.shutdown()
print('OK' if ok else 'FAIL')
sys.exit(0 if ok else 1)
