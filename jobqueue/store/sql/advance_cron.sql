-- advance_cron: move a cron entry's next fire time forward, compare-and-set on the value and schedule it was planned from.
-- Primary-key lookup; fenced on the leader lease (holder, token) when one is given.
UPDATE jobqueue_cronentry
SET next_fire_at = %(next_fire_at)s::timestamptz,
    last_fired_at = CASE WHEN %(last_fired_at)s::timestamptz IS NULL THEN last_fired_at
                         ELSE greatest(last_fired_at, %(last_fired_at)s::timestamptz) END,
    skipped_fires = skipped_fires + %(skipped)s
WHERE id = %(entry_id)s AND enabled
  AND next_fire_at IS NOT DISTINCT FROM %(expected)s::timestamptz
  AND cron_expr = %(cron_expr)s AND timezone = %(timezone)s
  AND (%(token)s::bigint IS NULL OR EXISTS (
        SELECT 1 FROM jobqueue_leaderlease
        WHERE name = %(lease_name)s AND holder = %(holder)s AND fencing_token = %(token)s::bigint))
