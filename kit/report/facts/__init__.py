"""Facts a buyer asks of a bundle, as pure functions over its typed model (kit.model: a
RunResult and the Hardware inventory): power and energy inside the timed window (window.py), share of the
datasheet peak and cost per unit of work (efficiency.py)."""
