-- One row per finished run of issue 63's hidden-pairs studies (experiments/htm/pairs_gates.toml,
-- pairs.toml, pairs_estimator.toml, and the nested pairs' pairs_deep_gates.toml and the diagnostic
-- pairs_deep.toml), exploration or confirmation (htm run --confirm): greedy and sampled sibling F1,
-- the test error (token by token, the adapter's "ordered" error) under the run's own policy, under the true tree and under random
-- merges, the references (random merges; the similarity rules on the raw tokens) and the
-- mean-set baseline; then the cluster scores (greedy, sampled, random merges, the raw-token rules),
-- which only the nested pairs' several merge layers make meaningful. Each seed's latest finished
-- run of a variant.
--   sqlite3 -header -csv DB < scripts/research/pairs.sql > results/pairs-DATE.csv
SELECT r.uuid, e.name AS experiment, r.variant, r.seed,
       CASE WHEN EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = 'phase' AND t.value = 'confirm')
            THEN 'confirmation' ELSE 'exploration' END AS phase,
       round(r.ended_at - r.started_at, 1) AS duration_s,
       max(CASE WHEN m.name = 'mse' THEN m.value END) AS test_mse,
       max(CASE WHEN m.name = 'sibling_f1' THEN m.value END) AS sibling_f1,
       max(CASE WHEN m.name = 'sampled/sibling_f1' THEN m.value END) AS sampled_sibling_f1,
       max(CASE WHEN m.name = 'sampled/mse' THEN m.value END) AS sampled_mse,
       max(CASE WHEN m.name = 'under/oracle/mse' THEN m.value END) AS under_truth_mse,
       max(CASE WHEN m.name = 'under/random/mse' THEN m.value END) AS under_random_mse,
       max(CASE WHEN m.name = 'random/sibling_f1' THEN m.value END) AS random_merges_sibling_f1,
       max(CASE WHEN m.name = 'agglomerative/sibling_f1' THEN m.value END) AS raw_nearest_sibling_f1,
       max(CASE WHEN m.name = 'farthest/sibling_f1' THEN m.value END) AS raw_farthest_sibling_f1,
       max(CASE WHEN m.name = 'cosine/sibling_f1' THEN m.value END) AS raw_cosine_sibling_f1,
       max(CASE WHEN m.name = 'anticosine/sibling_f1' THEN m.value END) AS raw_anticosine_sibling_f1,
       max(CASE WHEN m.name = 'tome/sibling_f1' THEN m.value END) AS raw_tome_sibling_f1,
       max(CASE WHEN m.name = 'baseline_mse' THEN m.value END) AS mean_set_mse,
       max(CASE WHEN m.name = 'cluster_f1' THEN m.value END) AS cluster_f1,
       max(CASE WHEN m.name = 'sampled/cluster_f1' THEN m.value END) AS sampled_cluster_f1,
       max(CASE WHEN m.name = 'random/cluster_f1' THEN m.value END) AS random_merges_cluster_f1,
       max(CASE WHEN m.name = 'agglomerative/cluster_f1' THEN m.value END) AS raw_nearest_cluster_f1,
       max(CASE WHEN m.name = 'farthest/cluster_f1' THEN m.value END) AS raw_farthest_cluster_f1,
       max(CASE WHEN m.name = 'tome/cluster_f1' THEN m.value END) AS raw_tome_cluster_f1,
       r.git_revision, r.config_hash
FROM runs r JOIN experiments e ON e.id = r.experiment_id
JOIN latest_metrics m ON m.run_id = r.id AND m.split = 'test'
WHERE r.status = 'finished' AND e.name IN ('htm-pairs-gates', 'htm-pairs', 'htm-pairs-estimator', 'htm-pairs-deep-gates',
                                            'htm-pairs-deep')
  AND r.id = (SELECT max(q.id) FROM runs q
              WHERE q.experiment_id = r.experiment_id AND q.variant = r.variant AND q.seed = r.seed
                AND q.status = 'finished')
GROUP BY r.id ORDER BY e.name, phase DESC, r.variant, r.seed;
