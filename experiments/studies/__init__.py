"""Commands that study the method: the ablation sweep (``ablation``, its sweep
file ``ablation.toml`` and committed state ``ablation_state/``), reproducibility
sweeps (``sweep``), net capacity (``capacity``), the cost of a checkpoint
(``checkpoint_cost``), what a raw policy knows of fives (``fives``), subtree reuse
(``reuse``) and supervised gomoku move prediction (``movepred``)."""
