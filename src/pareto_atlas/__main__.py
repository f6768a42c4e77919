from pareto_atlas.cli import app

app()
