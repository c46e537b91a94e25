"""Attribution methods and their scoring against warehouse labels."""
