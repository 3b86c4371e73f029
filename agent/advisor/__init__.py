"""The built-in advisor: the shared pool sized from measured run-queue delay, reclaimed pods
suppressed before anything is evicted, every decision recorded (docs/advisor.md)."""
