import './base.css';
import './allgpus.css';
import './charts.css';
