-- One row per finished run of the confirmations run on 2026-11-26 (Figure 5 at 1876 steps, the
-- classifier's 15-minute budget): its phase, duration, the final test metrics beside their
-- references (the mean image, PCA of the bottleneck's size, a ridge classifier on the pixels),
-- and what names the run: uuid, build revision and config hash. Written with
--   sqlite3 -csv -header results/htm.sqlite < docs/examples/trained_csv.sql > results/confirm-trained-2026-11-26.csv
WITH final AS (
  SELECT run_id,
         max(CASE WHEN name = 'mse' THEN value END) AS test_mse,
         max(CASE WHEN name = 'accuracy' THEN value END) AS test_accuracy,
         max(CASE WHEN name = 'baseline_mse' THEN value END) AS mean_image_mse,
         max(CASE WHEN name = 'baseline/pca_mse' THEN value END) AS pca_mse,
         max(CASE WHEN name = 'baseline/pca_components' THEN value END) AS pca_components,
         max(CASE WHEN name = 'baseline/linear_accuracy' THEN value END) AS linear_accuracy,
         max(CASE WHEN name = 'policy_variation' THEN value END) AS policy_variation
  FROM latest_metrics WHERE split = 'test' GROUP BY run_id)
SELECT r.uuid, e.name AS experiment, r.variant, r.seed,
       coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), 'explore') AS phase,
       round(r.ended_at - r.started_at, 1) AS duration_s,
       f.test_mse, f.test_accuracy, f.mean_image_mse, f.pca_mse, f.pca_components, f.linear_accuracy,
       f.policy_variation, r.git_revision, r.config_hash
FROM runs r JOIN experiments e ON e.id = r.experiment_id LEFT JOIN final f ON f.run_id = r.id
WHERE r.status = 'finished' AND e.name IN ('paper-attention-trained', 'training-classifier-budget')
  AND coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), 'explore') = 'confirm'
ORDER BY e.name, r.variant, r.seed;
