"""What tables announces to the apps that plug into it (alerts): they connect in their
AppConfig.ready, so tables imports none of them and runs without them."""

from django.dispatch import Signal

# sent by the sync in its last transaction: table (a Table), versions (the new versions, a
# list of int), first_sync (bool: the table's past, stored once, is no news)
commits_stored = Signal()

# sent by the daily pruning (tables.services.retention) with before (a datetime): a receiver
# deletes its own operational rows older than that and answers {what: how many}
prune = Signal()
