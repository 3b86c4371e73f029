"""QoS-aware dynamic CPU policy (Katalyst QRM ``dynamic`` semantics).

The pure core (qos, quantity, calculator, state, hints, pools, policy) does no
I/O; checkpoint, enforcement, periodic work and serving are thin adapters
around it.
"""
