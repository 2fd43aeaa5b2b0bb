"""Go commands (``agz_jax.go``; docs/go.md): the rules' speed (``bench``) and
cross-check against GnuGo (``referee``), self-play records from GnuGo or Pachi
(``records``), human games (``import_records``), the move-prediction data set
(``dataset``), training (``movepred``; ``train19`` on 19x19 human games) and
matches of the trained net against GnuGo or Pachi (``match``)."""
