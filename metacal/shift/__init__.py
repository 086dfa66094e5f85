"""A finished run, as it is, on shifted, unseen or new data (:func:`metacal.evaluate_run`, ``evaluate``): the text
tables of the result (``table``) and the per-sample confidences kept for the reports' curves (``samples``)."""
