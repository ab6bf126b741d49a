"""`rlm.utils`: the limit exceptions."""
