"""Query selection: which segments are asked about next. Random and disagreement selectors
for pairs and rankings (:mod:`preflab.selection.selectors.selectors`), and the groupwise selector with
its behaviour features, DTW distances, behaviour tree and exploration view (the Interactive
Groupwise Comparison paper). Layer: models (selectors see reward models through the
``RewardModel`` protocol only)."""
