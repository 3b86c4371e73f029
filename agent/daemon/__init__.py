"""The daemon process: its lifecycle, the component contract, and what every
component shares but none owns (logging, metrics endpoint, sd_notify, config
reload).

The modules here are the run time of ``hwagent run``; the domain packages
(``agent.cpu``, ``agent.devicemanager``, ``agent.workloads``, ...) plug into it
as components. Nothing is re-exported: import the module that holds a thing,
so the import graph shows who depends on the daemon's internals.
"""
