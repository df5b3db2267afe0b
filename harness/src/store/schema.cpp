#include "store/schema.h"

namespace bench::store {

namespace {

// Version 1. Keep in sync with docs/results.md.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  status TEXT NOT NULL CHECK(status IN ('running','completed','failed','interrupted')),
  error TEXT,
  experiment_name TEXT NOT NULL,
  experiment_path TEXT NOT NULL,
  experiment_text TEXT NOT NULL,
  experiment_sha256 TEXT NOT NULL,
  git_sha TEXT NOT NULL,
  harness_version TEXT NOT NULL,
  plugins_json TEXT NOT NULL,
  device TEXT NOT NULL,
  device_json TEXT NOT NULL,
  compiler TEXT NOT NULL,
  build_flags TEXT NOT NULL,
  seed INTEGER NOT NULL,
  command_line TEXT NOT NULL,
  hostname TEXT NOT NULL,
  n_cases INTEGER NOT NULL);

CREATE TABLE cases(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  ordinal INTEGER NOT NULL,
  runner TEXT NOT NULL,
  label TEXT NOT NULL,
  variant TEXT NOT NULL,
  axes_json TEXT NOT NULL,
  config_json TEXT NOT NULL,
  seed INTEGER NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('completed','diverged','failed','interrupted')),
  error TEXT,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  wall_s REAL NOT NULL,
  n_params INTEGER,
  n_params_embedding INTEGER,
  flops_per_token REAL,
  UNIQUE(run_id, ordinal));

CREATE TABLE throughput(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  mode TEXT NOT NULL,
  repetitions INTEGER NOT NULL,
  iterations INTEGER NOT NULL,
  median_ms REAL NOT NULL,
  mean_ms REAL NOT NULL,
  min_ms REAL NOT NULL,
  max_ms REAL NOT NULL,
  stddev_ms REAL NOT NULL,
  mad_ms REAL NOT NULL,
  tokens_per_s REAL NOT NULL,
  flops_per_iter REAL NOT NULL,
  gflops_per_s REAL NOT NULL,
  mfu REAL,
  peak_bytes INTEGER,
  PRIMARY KEY(case_id, mode));

CREATE TABLE samples(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  mode TEXT NOT NULL,
  repetition INTEGER NOT NULL,
  ms REAL NOT NULL,
  PRIMARY KEY(case_id, mode, repetition));

CREATE TABLE steps(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  step INTEGER NOT NULL,
  lr REAL,
  loss REAL,
  grad_norm REAL,
  max_attn_logit REAL,
  z_mean REAL,
  z_loss REAL,
  ms REAL,
  PRIMARY KEY(case_id, step));

CREATE TABLE metrics(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  name TEXT NOT NULL,
  value REAL,
  unit TEXT NOT NULL,
  PRIMARY KEY(case_id, name));

CREATE INDEX cases_run_id ON cases(run_id);
CREATE INDEX runs_experiment_name ON runs(experiment_name);

-- One row per (case, metric), with the case's run and identity alongside: the table most
-- questions about summaries start from.
CREATE VIEW results AS
SELECT r.id AS run_id, r.experiment_name, r.git_sha, r.device, r.started_at AS run_started_at,
       r.status AS run_status, c.id AS case_id, c.ordinal, c.runner, c.label, c.variant, c.axes_json,
       c.seed, c.status, m.name AS metric, m.value, m.unit
FROM cases c
JOIN runs r ON r.id = c.run_id
JOIN metrics m ON m.case_id = c.id;
)sql";

// Version 2: named per-step series beside the fixed `steps` columns (validation loss, parameter
// norm, per-layer statistics ...), one row per (case, name, layer, step). `layer` is NULL for a
// whole-model value; step -1 holds values measured at initialization, before any update.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE series(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  name TEXT NOT NULL,
  layer INTEGER,
  step INTEGER NOT NULL,
  value REAL);
CREATE UNIQUE INDEX series_key ON series(case_id, name, ifnull(layer, -1), step);
)sql";

// Version 3: files a case produced, such as the final weights of a stability case
// (`save_weights = true`), by path relative to the database's directory.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE artifacts(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY(case_id, kind));
)sql";

// Version 4: the process that writes a run (its pid, beside the existing hostname), so that a run
// left 'running' by a killed process can be recognised as stale and marked failed.
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE runs ADD COLUMN pid INTEGER;
)sql";

// Version 5: sweeps that run in pieces (`bench run --shard I/N`, --jobs, --devices, Slurm job arrays)
// and are merged into one database (`bench merge`). Every run gets a unique `uid` that survives
// merging; a shard's run names its sweep, its shard and the sweep's case count; a merged run of a
// sweep has `sweep` and `shard_count` with `shard_index` NULL, and one `run_sources` row per run it
// took cases from (that run's host, device and build: the shards of one sweep may have run on
// different machines). A case records where it ran (`placement`) and, once merged, the uid of the
// run that measured it (`source_uid`).
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE runs ADD COLUMN uid TEXT;
UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL;
CREATE UNIQUE INDEX runs_uid ON runs(uid);
ALTER TABLE runs ADD COLUMN sweep TEXT;
ALTER TABLE runs ADD COLUMN shard_index INTEGER;
ALTER TABLE runs ADD COLUMN shard_count INTEGER;
ALTER TABLE runs ADD COLUMN sweep_cases INTEGER;
CREATE INDEX runs_sweep ON runs(sweep);
ALTER TABLE cases ADD COLUMN placement TEXT;
ALTER TABLE cases ADD COLUMN source_uid TEXT;
CREATE TABLE run_sources(
  run_id INTEGER NOT NULL REFERENCES runs(id),
  source_uid TEXT NOT NULL,
  source_db TEXT NOT NULL,
  shard_index INTEGER,
  status TEXT NOT NULL,
  hostname TEXT NOT NULL,
  device TEXT NOT NULL,
  device_json TEXT NOT NULL,
  git_sha TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  merged_at TEXT NOT NULL,
  PRIMARY KEY(run_id, source_uid));
)sql";

// Version 6: timing that knows when it is noisy. Each throughput mode keeps the relative spread
// its repetitions reached (`noise`, 1.4826 MAD / median), the target it timed towards (`max_noise`),
// whether it stopped above the target (`noisy`, 0/1), and the machine's state around its timing:
// the 1-minute load average (`load_avg`), the share of its cores' time stolen by a hypervisor
// (`steal`) and kept busy by other processes (`other_busy`), and how many cores it could run on
// (`cores`). Rows written before version 6 have NULL in all of them.
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE throughput ADD COLUMN noise REAL;
ALTER TABLE throughput ADD COLUMN max_noise REAL;
ALTER TABLE throughput ADD COLUMN noisy INTEGER;
ALTER TABLE throughput ADD COLUMN load_avg REAL;
ALTER TABLE throughput ADD COLUMN steal REAL;
ALTER TABLE throughput ADD COLUMN other_busy REAL;
ALTER TABLE throughput ADD COLUMN cores INTEGER;
)sql";

// Version 7: the per-kernel profile of each throughput case (docs/results.md, "The profile"): one
// row per (mode, scope, slot, pass, kernel) of one step (a norm position and the norm it builds
// share a scope), measured in untimed steps apart from the
// timed repetitions. `scope` is where the component sits ("blocks.0.attn_norm", "" for the model
// itself), `slot` its slot ("norm"; "model" and "optimizer" for work outside components), `component`
// its type ("rmsnorm"), `pass` forward, backward, optimizer or step (the step around them: zeroing
// gradients, waiting for the device), `kernel` a tile program's readable
// name, a GEMM ("gemm NT"), a launcher's label, or "(host)" / "(between kernels)". `calls` are the
// launches in one step, `ms` their time in one step (mean over the profiled steps), `bytes` and
// `flops` what the kernels declare for one step (NULL when not declared). The ceilings a row is
// read against are the case's metrics `roof_gbps` (measured copy bandwidth) and `roof_gflops`
// (measured GEMM rate), and `profile_step_ms/<mode>` is the profiled step's own time.
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE profile(
  case_id INTEGER NOT NULL REFERENCES cases(id),
  mode TEXT NOT NULL,
  scope TEXT NOT NULL,
  slot TEXT NOT NULL,
  component TEXT NOT NULL,
  pass TEXT NOT NULL,
  kernel TEXT NOT NULL,
  calls INTEGER NOT NULL,
  ms REAL NOT NULL,
  bytes REAL,
  flops REAL,
  PRIMARY KEY(case_id, mode, scope, slot, pass, kernel));
)sql";

// Version 8: a case's notes, what a reader should know beside its numbers (a device's steps
// that could not be captured into a CUDA graph, and why); NULL when there are none.
constexpr const char* kSchemaV8 = R"sql(
ALTER TABLE cases ADD COLUMN notes TEXT;
)sql";

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all_migrations = {
      {1, kSchemaV1}, {2, kSchemaV2}, {3, kSchemaV3}, {4, kSchemaV4},
      {5, kSchemaV5}, {6, kSchemaV6}, {7, kSchemaV7}, {8, kSchemaV8},
  };
  return all_migrations;
}

}  // namespace bench::store
