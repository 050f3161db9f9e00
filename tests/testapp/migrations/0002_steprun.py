from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("testapp", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="StepRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("job_id", models.BigIntegerField(db_index=True)),
                ("step", models.PositiveIntegerField()),
                ("attempt", models.PositiveIntegerField()),
            ],
        ),
    ]
