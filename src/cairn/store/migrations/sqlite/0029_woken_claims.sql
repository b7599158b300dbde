-- cairn schema 29: whether the claim that holds a RUNNING run took it as it woke (a
-- parked run now due: the claim counted no attempt). A run handed back having written
-- nothing is put back as that claim found it, whichever path resumed it: the worker that
-- got the claim's reply, or its reconciler after the reply was lost. 0 for the rest.
ALTER TABLE runs ADD COLUMN claim_woke INTEGER NOT NULL DEFAULT 0;
