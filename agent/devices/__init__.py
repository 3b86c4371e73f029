"""Device inventory: PCI/block/net devices read from sysfs (or udev), resource
rules that map them to extended resources, and hotplug that keeps it current."""
