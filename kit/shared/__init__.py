"""Facts both halves use, standard library only: the driver imports them, and they are copied
into every benchmark image beside the worker, which imports them too."""
