"""Tower: veglia's trace records sent to Seqera Platform's trace API, as Nextflow's nf-tower.

Records are queued durably (the profile database's outbox) when a job ends and sent by the
daemon (or ``veglia tower flush``) in batches, with retries and backoff, so that reporting
never slows or fails a job and nothing is lost when the Platform is down for a while.
"""
