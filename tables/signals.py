"""What tables announces to the apps that plug into it (tables.plugins names the worked example): they connect in their
AppConfig.ready, so tables imports none of them and runs without them."""

from django.dispatch import Signal

# sent by the sync in its last transaction: table (a Table), versions (the new versions, a
# list of int), first_sync (bool: the table's past, stored once, is no news)
commits_stored = Signal()

# sent by the sync's look at the table's files, in the transaction that stores the event, when
# files the log still references were found gone: table (a Table), event (a FileRemovalEvent)
files_removed = Signal()

# sent by a look at a table's log (tables.services.chain.look), in the transaction that stores
# the finding, when an already-seen commit was found rewritten, vanished before its retention
# or back with new content: table (a Table), finding (a HistoryRewrite)
history_rewritten = Signal()

# sent by the daily pruning (tables.services.ops.retention) with before (a datetime): a receiver
# deletes its own operational rows older than that and answers {what: how many}
prune = Signal()
