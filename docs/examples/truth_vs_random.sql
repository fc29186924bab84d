-- The same weights evaluated under the true tree and under random merges, paired per seed
-- (train.eval_policies = ["oracle", "random"]; docs/policy.md). Usage:
--   sqlite3 -header -column -cmd ".parameter set :exp htm-signal" results/htm.sqlite < docs/examples/truth_vs_random.sql
with v as (
  select r.id, r.variant, r.seed,
    max(case when m.name='under/oracle/loss/point_set' then m.value end) truth,
    max(case when m.name='under/random/loss/point_set' then m.value end) rand,
    max(case when m.name='loss/point_set' then m.value end) own
  from runs r join experiments e on e.id = r.experiment_id join latest_metrics m on m.run_id = r.id
  where e.name = :exp and r.status = 'finished' and m.split = 'test' group by r.id)
select variant, count(*) n, round(avg(own), 4) own, round(avg(truth), 4) under_truth, round(avg(rand), 4) under_random,
  round(avg(100.0 * (truth / rand - 1)), 1) truth_vs_random_pct,
  round(min(100.0 * (truth / rand - 1)), 1) min_pct, round(max(100.0 * (truth / rand - 1)), 1) max_pct
from v group by variant order by min(id);
