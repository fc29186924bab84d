-- One row per finished run of the issue-39 studies (experiments/htm/mirrored.toml, residual.toml,
-- residual_crosses.toml, mirrored_exact.toml, self_critical.toml, fashion_long.toml), exploration
-- or confirmation (htm run --confirm): the greedy and sampled hierarchy scores, the reconstruction error of the
-- trained weights under their own policy, under the true tree and under random merges, and the
-- references (random merges, agglomerative clustering on the stored positions), and `residual`'s
-- gate g and log inverse temperature as evaluation last logged them (policy/<name>, from 2026-12-05).
--   sqlite3 -header -csv DB < scripts/research/issue39.sql > results/issue39-DATE.csv
SELECT r.uuid, e.name AS experiment, r.variant, r.seed,
       CASE WHEN EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = 'phase' AND t.value = 'confirm')
            THEN 'confirmation' ELSE 'exploration' END AS phase,
       round(r.ended_at - r.started_at, 1) AS duration_s,
       max(CASE WHEN m.name = 'mse' THEN m.value END) AS test_mse,
       max(CASE WHEN m.name = 'cluster_f1' THEN m.value END) AS cluster_f1,
       max(CASE WHEN m.name = 'sibling_f1' THEN m.value END) AS sibling_f1,
       max(CASE WHEN m.name = 'sampled/cluster_f1' THEN m.value END) AS sampled_cluster_f1,
       max(CASE WHEN m.name = 'sampled/mse' THEN m.value END) AS sampled_mse,
       max(CASE WHEN m.name = 'sampled/sibling_f1' THEN m.value END) AS sampled_sibling_f1,
       max(CASE WHEN m.name = 'under/oracle/mse' THEN m.value END) AS under_truth_mse,
       max(CASE WHEN m.name = 'under/random/mse' THEN m.value END) AS under_random_mse,
       max(CASE WHEN m.name = 'random/cluster_f1' THEN m.value END) AS random_merges_cluster_f1,
       max(CASE WHEN m.name = 'agglomerative/cluster_f1' THEN m.value END) AS agglomerative_cluster_f1,
       max(CASE WHEN m.name = 'baseline_mse' THEN m.value END) AS mean_set_mse,
       max(CASE WHEN m.name = 'policy/gate' THEN m.value END) AS policy_gate,
       max(CASE WHEN m.name = 'policy/log_inverse_temperature' THEN m.value END) AS policy_log_inverse_temperature,
       r.git_revision, r.config_hash
FROM runs r JOIN experiments e ON e.id = r.experiment_id
JOIN latest_metrics m ON m.run_id = r.id AND m.split = 'test'
WHERE r.status = 'finished' AND e.name IN ('htm-mirrored', 'htm-residual', 'htm-mirrored-exact', 'htm-self-critical', 'htm-fashion-long',
                   'htm-residual-crosses')
  AND r.id = (SELECT max(q.id) FROM runs q  -- each seed's latest finished run, as htm compare takes
              WHERE q.experiment_id = r.experiment_id AND q.variant = r.variant AND q.seed = r.seed
                AND q.status = 'finished')
GROUP BY r.id ORDER BY e.name, r.variant, r.seed;
