"""Commands that make nets beside the main job: the curriculum (``curriculum``),
distillation into other net sizes (``distill``) and the self-play campaign's
exported nets and compute ledger (``campaign``)."""
