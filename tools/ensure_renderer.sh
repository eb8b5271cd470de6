#!/usr/bin/env bash
# Make SAPIEN able to render on this machine, or say clearly why it cannot.
# SAPIEN 3 needs a Vulkan device with descriptorBindingPartiallyBound; Debian 12's Mesa 22.3 lacks it,
# Mesa from bookworm-backports has it and renders on the CPU (lavapipe).
set -uo pipefail
PY=${1:-.venv/bin/python}

probe() { "$PY" -m robofollow_ros.diagnostics render-probe >/dev/null 2>&1; }

if probe; then
  echo "==> SAPIEN rendering works ($("$PY" -m robofollow_ros.diagnostics render-probe 2>/dev/null))"
  exit 0
fi

reason=""
if [ "$(id -u)" != "0" ]; then
  reason="not root, so apt cannot install mesa-vulkan-drivers"
elif ! command -v apt-get >/dev/null; then
  reason="apt-get is not available"
elif ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  reason="this is not Debian 12 (bookworm); install a Vulkan driver with descriptor indexing yourself"
fi

if [ -z "$reason" ]; then
  echo "==> SAPIEN cannot render: installing mesa-vulkan-drivers from bookworm-backports"
  src=/etc/apt/sources.list.d/robofollow-backports.sources
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
  fi
  export DEBIAN_FRONTEND=noninteractive
  if apt-get update -qq && apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null; then
    if probe; then
      echo "==> SAPIEN rendering works ($("$PY" -m robofollow_ros.diagnostics render-probe 2>/dev/null))"
      exit 0
    fi
    reason="mesa-vulkan-drivers from bookworm-backports installed, but SAPIEN still finds no device"
  else
    reason="apt-get could not install mesa-vulkan-drivers from bookworm-backports"
  fi
fi

echo "==> RENDERING IS OFF: $reason. Physics, scoring and render-free runs still work;" \
     "camera images, snapshots and perception need a renderer ('robofollow doctor' shows the state)."
exit 0
