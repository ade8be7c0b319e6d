"""`lengthgen release` and `lengthgen verify`: a trained output folder -> a Hub-ready model folder (`folder`: model,
code, tokenizer, plot and a model card with model-index results, `card`), its upload (`hub`), and a release folder
scored again with transformers alone (`verify`, which imports none of lengthgen's model code)."""
