"""The parts ``Policy`` is made of (acting, updates, state), what builds a copy of one, and the actor-critic policy."""
