-- Issue 63's gates on the hidden pairs (experiments/htm/pairs_gates.toml) and the nested hidden
-- pairs (pairs_deep_gates.toml), one row a gate and a seed: the figure, its threshold, whether it
-- holds, and the runs it reads (uuids). Each seed's latest finished run of a variant counts, as
-- htm compare takes them. Thresholds (each file's header froze them before its first run):
--   sqlite3 -header -csv DB < scripts/research/pairs_gates.sql > results/pairs-gates-DATE.csv
--   G1  truth's test MSE / min(random's, nearest's)             <= 0.3 (deep: 0.5)
--   G2  random's test MSE / the mean-set baseline                >= 0.25
--   G3  half_truth's MSE under the true tree / under random ones <= 0.5 (deep: 0.7)
--   G4  each similarity rule's sibling F1 on the raw tokens      <= 1/3 of the fixed bilinear
--       score's (1.0000 on this data, tests/pairs_data_test.cpp), i.e. <= 0.3333; deep: also
--       its cluster F1 <= 0.3
WITH limits(experiment, g1, g3, g4_cluster) AS (
  VALUES ('htm-pairs-gates', 0.3, 0.5, NULL), ('htm-pairs-deep-gates', 0.5, 0.7, 0.3)),
latest AS (
  SELECT r.id, r.uuid, e.name AS experiment, r.variant, r.seed FROM runs r JOIN experiments e ON e.id = r.experiment_id
  WHERE e.name IN (SELECT experiment FROM limits) AND r.status = 'finished'
    AND r.id = (SELECT max(q.id) FROM runs q WHERE q.experiment_id = r.experiment_id AND q.variant = r.variant
                AND q.seed = r.seed AND q.status = 'finished')),
v AS (
  SELECT l.experiment, l.variant, l.seed, l.uuid, lm.name, lm.value, lim.g1, lim.g3, lim.g4_cluster
  FROM latest l JOIN latest_metrics lm ON lm.run_id = l.id JOIN limits lim ON lim.experiment = l.experiment
  WHERE lm.split = 'test'),
rules(rule) AS (VALUES ('agglomerative'), ('farthest'), ('cosine'), ('anticosine'), ('tome'))
SELECT t.experiment, 'G1' AS gate, t.seed, t.value / min(r.value, n.value) AS figure, t.g1 AS threshold,
       t.value / min(r.value, n.value) <= t.g1 AS holds, t.uuid || ' ' || r.uuid || ' ' || n.uuid AS runs
FROM v t JOIN v r ON r.experiment = t.experiment AND r.seed = t.seed AND r.variant = 'random' AND r.name = 'mse'
         JOIN v n ON n.experiment = t.experiment AND n.seed = t.seed AND n.variant = 'nearest' AND n.name = 'mse'
WHERE t.variant = 'truth' AND t.name = 'mse'
UNION ALL
SELECT r.experiment, 'G2', r.seed, r.value / b.value, 0.25, r.value / b.value >= 0.25, r.uuid
FROM v r JOIN v b ON b.uuid = r.uuid AND b.name = 'baseline_mse'
WHERE r.variant = 'random' AND r.name = 'mse'
UNION ALL
SELECT t.experiment, 'G3', t.seed, t.value / r.value, t.g3, t.value / r.value <= t.g3, t.uuid
FROM v t JOIN v r ON r.uuid = t.uuid AND r.name = 'under/random/mse'
WHERE t.variant = 'half_truth' AND t.name = 'under/oracle/mse'
UNION ALL
SELECT f.experiment, 'G4 ' || rule || ' sibling', f.seed, f.value, 1.0 / 3, f.value <= 1.0 / 3, f.uuid
FROM v f JOIN rules ON f.name = rule || '/sibling_f1' WHERE f.variant = 'truth'
UNION ALL
SELECT f.experiment, 'G4 ' || rule || ' cluster', f.seed, f.value, f.g4_cluster, f.value <= f.g4_cluster, f.uuid
FROM v f JOIN rules ON f.name = rule || '/cluster_f1' WHERE f.variant = 'truth' AND f.g4_cluster IS NOT NULL
ORDER BY 1 DESC, gate, seed;
