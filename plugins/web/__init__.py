"""``veglia web``: a live view of the profile's workflows and jobs, and ``veglia report``."""
