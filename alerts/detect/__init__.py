"""Finding what deserves an alert: the facts a rule sees of a commit, the rules, evaluating a scan, and the beat's check for silent tables."""
