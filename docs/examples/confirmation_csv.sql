-- One row per finished run of the policy studies, with its phase (tag phase=confirm, else
-- explore), the final test metrics, each F1's peak over the run (for the late-collapse count),
-- and what names the run: its uuid, build revision and config hash. Written to
-- results/confirm-2026-11-25.csv with
--   sqlite3 -csv -header results/htm.sqlite < docs/examples/confirmation_csv.sql > results/confirm-2026-11-25.csv
WITH final AS (
  SELECT run_id,
         max(CASE WHEN name = 'mse' THEN value END) AS test_mse,
         max(CASE WHEN name = 'loss/point_set' THEN value END) AS point_set_loss,
         max(CASE WHEN name = 'cluster_f1' THEN value END) AS cluster_f1,
         max(CASE WHEN name = 'sibling_f1' THEN value END) AS sibling_f1,
         max(CASE WHEN name = 'random/cluster_f1' THEN value END) AS random_merges_cluster_f1,
         max(CASE WHEN name = 'agglomerative/cluster_f1' THEN value END) AS agglomerative_cluster_f1,
         max(CASE WHEN name = 'baseline_mse' THEN value END) AS mean_image_mse,
         max(CASE WHEN name = 'policy_variation' THEN value END) AS policy_variation
  FROM latest_metrics WHERE split = 'test' GROUP BY run_id),
peak AS (
  SELECT run_id,
         max(CASE WHEN name = 'cluster_f1' THEN value END) AS peak_cluster_f1,
         max(CASE WHEN name = 'sibling_f1' THEN value END) AS peak_sibling_f1
  FROM metrics WHERE split = 'test' AND name IN ('cluster_f1', 'sibling_f1') GROUP BY run_id)
SELECT r.uuid, e.name AS experiment, r.variant, r.seed,
       coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), 'explore') AS phase,
       round(r.ended_at - r.started_at, 1) AS duration_s,
       f.test_mse, f.point_set_loss, f.cluster_f1, p.peak_cluster_f1, f.sibling_f1, p.peak_sibling_f1,
       f.random_merges_cluster_f1, f.agglomerative_cluster_f1, f.mean_image_mse, f.policy_variation,
       r.git_revision, r.config_hash
FROM runs r JOIN experiments e ON e.id = r.experiment_id
LEFT JOIN final f ON f.run_id = r.id LEFT JOIN peak p ON p.run_id = r.id
WHERE r.status = 'finished' AND e.name LIKE 'htm-policy%'
ORDER BY e.name, r.variant, r.seed;
