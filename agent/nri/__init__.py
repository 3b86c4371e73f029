"""hwagent as an NRI plugin: ttrpc (ttrpc.py), NRI's connection multiplexer (mux.py) and the plugin (plugin.py).

Off by default (``[nri] enabled``); docs/nri.md says what exists and what is to come.
"""
