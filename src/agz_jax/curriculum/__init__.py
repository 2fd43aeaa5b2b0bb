"""The curriculum stages (paper Section IV)."""
