#!/bin/sh
# Creates Temporal's two databases and brings their schemas up to date; safe to run again.
set -eu
tool() { temporal-sql-tool --plugin postgres12 --ep temporal-db -p 5432 -u temporal "$@"; }
for db in temporal temporal_visibility; do
  tool --db "$db" create || true  # exists already on a re-run
  tool --db "$db" setup-schema -v 0.0 || true
done
tool --db temporal update-schema -d /etc/temporal/schema/postgresql/v12/temporal/versioned
tool --db temporal_visibility update-schema -d /etc/temporal/schema/postgresql/v12/visibility/versioned
echo "Temporal's schema is up to date"
