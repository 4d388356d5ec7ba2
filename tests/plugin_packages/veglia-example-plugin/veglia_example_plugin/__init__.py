"""An example third-party plugin package for veglia."""
