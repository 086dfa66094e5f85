from .study import STUDIES
