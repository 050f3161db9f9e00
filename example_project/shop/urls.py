"""URLs of the shop."""

from django.urls import path

from . import views

app_name = "shop"

urlpatterns = [
    path("", views.orders, name="orders"),
]
