//! Prometheus text exposition for `smart_limit_metrics` locations (filled in by a later change).
