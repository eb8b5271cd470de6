"""The physical rig's side of the bridge (ROS-free): command safety and driver mappings."""
