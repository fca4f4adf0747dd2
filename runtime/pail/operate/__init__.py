"""Operator reads and actions over the storage port: what a dashboard and ``pail jobs`` need.

Every read here is bounded: a caller says how many pages of 1,000 keys it
may list, and every count says whether it is exact or a lower bound (the
listing stopped before the end). Nothing is read from the bucket without
being treated as foreign bytes: an object that is not a pail job (a folder
marker, a non-JSON body, pailq 0.1.1's ``NaN``) is shown as such, never
raised.

* ``queues``: the queues (namespaces) in a bucket;
* ``snapshot``: one bounded read of a queue's prefixes, and its census;
* ``jobs``: jobs by state with their age, and their details;
* ``failures``: recent failed attempts and dead letters;
* ``purge``: cancel every pending job (never a running one);
* ``dead_letters``: inspect and delete one dead letter.
"""
