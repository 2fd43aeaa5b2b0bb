"""Layer 8, studies: experiments over the library. The ablation (``ablation``,
``ablation_train``, ``ablation_matches``, ``ablation_store``,
``ablation_report``), sweeps and several seeds as one computation (``sweep``,
``seeds``), move prediction (``movepred``, ``movepred_data``,
``movepred_report``), the ladder (``ledger``, ``ladder``, ``ladder_report``),
the outside yardstick (``outside``) and the bench's measurements
(``bench_inputs``, ``bench_search``, ``bench_measures``, ``bench_report``).

May import every other layer.
"""
