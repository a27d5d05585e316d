"""Facts a buyer asks of a bundle, as pure functions over plain dicts (results.json run results
and hardware.json as written): power and energy inside the timed window (window.py), share of the
datasheet peak and cost per unit of work (efficiency.py)."""
