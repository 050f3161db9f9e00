"""URLs of the example project: the admin, and the shop at the root."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("example_project.shop.urls")),
]
