-- Issue 63's gates on the hidden pairs (experiments/htm/pairs_gates.toml), one row a gate and a
-- seed: the figure, its threshold, whether it holds, and the runs it reads (uuids). Each seed's
-- latest finished run of a variant counts, as htm compare takes them.
--   sqlite3 -header -csv DB < scripts/research/pairs_gates.sql > results/pairs-gates-DATE.csv
--   G1  truth's test MSE / min(random's, nearest's)             <= 0.3
--   G2  random's test MSE / the mean-set baseline                >= 0.25
--   G3  half_truth's MSE under the true tree / under random ones <= 0.5
--   G4  each similarity rule's sibling F1 on the raw tokens      <= 1/3 of the fixed bilinear
--       score's (1.0000 on this data, tests/pairs_data_test.cpp), i.e. <= 0.3333
WITH latest AS (
  SELECT r.id, r.uuid, r.variant, r.seed FROM runs r JOIN experiments e ON e.id = r.experiment_id
  WHERE e.name = 'htm-pairs-gates' AND r.status = 'finished'
    AND r.id = (SELECT max(q.id) FROM runs q WHERE q.experiment_id = r.experiment_id AND q.variant = r.variant
                AND q.seed = r.seed AND q.status = 'finished')),
m AS (
  SELECT l.variant, l.seed, l.uuid, lm.name, lm.value FROM latest l JOIN latest_metrics lm ON lm.run_id = l.id
  WHERE lm.split = 'test'),
v AS (SELECT variant, seed, uuid, name, value FROM m)
SELECT 'G1' AS gate, t.seed, t.value / min(r.value, n.value) AS figure, 0.3 AS threshold,
       t.value / min(r.value, n.value) <= 0.3 AS holds, t.uuid || ' ' || r.uuid || ' ' || n.uuid AS runs
FROM v t JOIN v r ON r.seed = t.seed AND r.variant = 'random' AND r.name = 'mse'
         JOIN v n ON n.seed = t.seed AND n.variant = 'nearest' AND n.name = 'mse'
WHERE t.variant = 'truth' AND t.name = 'mse'
UNION ALL
SELECT 'G2', r.seed, r.value / b.value, 0.25, r.value / b.value >= 0.25, r.uuid
FROM v r JOIN v b ON b.uuid = r.uuid AND b.name = 'baseline_mse'
WHERE r.variant = 'random' AND r.name = 'mse'
UNION ALL
SELECT 'G3', t.seed, t.value / r.value, 0.5, t.value / r.value <= 0.5, t.uuid
FROM v t JOIN v r ON r.uuid = t.uuid AND r.name = 'under/random/mse'
WHERE t.variant = 'half_truth' AND t.name = 'under/oracle/mse'
UNION ALL
SELECT 'G4 ' || replace(f.name, '/sibling_f1', ''), f.seed, f.value, 1.0 / 3, f.value <= 1.0 / 3, f.uuid
FROM v f WHERE f.variant = 'truth' AND f.name IN ('agglomerative/sibling_f1', 'farthest/sibling_f1',
  'cosine/sibling_f1', 'anticosine/sibling_f1', 'tome/sibling_f1')
ORDER BY gate, seed;
