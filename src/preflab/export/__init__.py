"""Exports of a run's feedback: open formats (parquet + npz + JSON) and the Hugging Face
dataset card and loader. Layer: models (beside reward, policy, selection, aggregate)."""
