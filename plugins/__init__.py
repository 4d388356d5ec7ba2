"""veglia's built-in plugins: transports, schedulers, calculations, Fusion and Tower.

Each is registered through the same entry points a third-party package would use.
"""
