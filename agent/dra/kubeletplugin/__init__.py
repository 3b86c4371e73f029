"""hwagent's DRA driver as the kubelet sees it (kubelet mode).

- ``registration``: the plugin-watcher handshake (``GetInfo`` answers type
  ``DRAPlugin``, the driver name, the DRA socket and the services offered);
- ``service``: ``DRAPlugin`` v1 and v1beta1 over the driver's ``ClaimPreparer``
  (``DRA_DRIVER``), per-claim errors in the per-claim answer;
- ``health``: ``DRAResourceHealth`` (``NodeWatchResources``) from the device
  plugins' health (rules and the health board);
- ``component``: serves both sockets under the kubelet's root.

The claim model, allocation and prepare/unprepare themselves are the rest of
``agent.dra``; this package only speaks the kubelet's protocol.
"""
