"""Commands that play: matches between two players (``arena``), the rating
ladder (``ladder``), Rapfi as an outside yardstick (``outside``), balanced
opening sets (``openings``), ``pbrain-agz``'s clock (``brain_timing``), and
readings of played games and positions: the VCF reader on an outside ledger
(``vcf_report``), the mentor's tactics (``tactics``) and black's forbidden
moves against an independent referee (``renju_check``)."""
