"""URLs for tests/ops/test_metrics.py: the metrics view mounted as a site would mount it."""

from django.urls import path

import jobqueue.metrics

urlpatterns = [
    path("metrics/", jobqueue.metrics.view),
    path("cached/", jobqueue.metrics.cached_view(3600)),
]
