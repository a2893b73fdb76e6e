"""corral's built-in algorithms. Each is registered through corral's own entry points,
exactly like a third-party plugin, and imports only ``corral.core``."""
