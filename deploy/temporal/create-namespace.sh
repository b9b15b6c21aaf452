#!/bin/sh
# The namespace Perdure runs in (TEMPORAL_NAMESPACE), with 7 days of closed-workflow retention.
set -eu
if temporal operator namespace describe --namespace default >/dev/null 2>&1; then
  echo "namespace default exists"
else
  temporal operator namespace create --namespace default --retention 7d
fi
